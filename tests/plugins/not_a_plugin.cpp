// A shared library without the runner symbols.
extern "C" int some_other_library_function() { return 7; }
