// The card's own bandwidth and throughput tests, like a GPU bandwidth test: memory (read, write,
// copy, from 1..N cores), ring (neighbour, farthest, all cores), PCIe (H2D/D2H by size) and the
// PT array. Each probe runs workloads on a built card and reports what the models achieve.
#pragma once
#include <nlohmann/json.hpp>

#include "models/card.h"

namespace vspyre {

nlohmann::json probe_memory(Card& card);
nlohmann::json probe_ring(Card& card);
nlohmann::json probe_pcie(Card& card);
nlohmann::json probe_pt(Card& card);

// Prints a probe's result as a table for people.
void print_probe(const std::string& name, const nlohmann::json& result);

}  // namespace vspyre
