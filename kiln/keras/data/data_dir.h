// Where kiln's shipped data files (digits.csv.gz) are read from.
//
// In order: the KILN_DATA_DIR environment variable (used as given, even if it does not
// exist: the reader then names it in its error); the installed `<prefix>/share/kiln/data`,
// where <prefix> is the parent of the directory holding the kiln library (shared build) or
// the program linked with it (static build), so an installed tree can be moved; the source
// tree's data/ that the library was built from (running from the build tree).
#pragma once

#include <string>

namespace kiln::data {

// The directory, without a trailing slash.
std::string data_dir();

}  // namespace kiln::data
