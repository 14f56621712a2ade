// Copying data in and out of pipeline Elements (pipeline.h): one row of every tensor, and a
// list of elements stacked into a batch. Plain memory copies of concrete tensors, no ops: the
// results are the same bytes `gather`/`stack` would give, and nothing is recorded by a
// gradient tape or a trace running on the pulling thread.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kiln/keras/data/pipeline.h"

namespace kiln::data {

// Row `i` (axis 0) of every tensor of `rows`, keeping each Arrays' structure.
Element element_row(const Element& rows, int64_t i);

// The elements stacked along a new axis 0, keeping their structure. `first_index` is the pass
// position of elements[0]; a structure, dtype or shape differing from elements[0]'s is a
// kiln::Error naming both elements by their pass positions and what they hold.
Element stack_elements(const std::vector<Element>& elements, int64_t first_index);

// "x: a tensor of shape (2, 3), y: a tensor of shape ()" (dtypes included), for messages.
std::string describe_element(const Element& e);

}  // namespace kiln::data
