// The translation unit that carries the precompiled <torch/types.h> of the executables
// (cmake/RunnerPch.cmake).
int main() { return 0; }
