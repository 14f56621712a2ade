// kiln_core_link_check's entry point (frontend/CMakeLists.txt): the program exists to be linked,
// every object of the tensor core with nothing from keras/, and prints what it is when run.
#include <cstdio>

int main() {
  std::puts("kiln_core_link_check: the tensor core links without the Keras library");
  return 0;
}
