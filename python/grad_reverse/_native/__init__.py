"""The package's private runtime: the native op library and the choices around it.

Bottom to top (imports point down only, inside functions too;
tests/op/test_import_layers.py checks the package has no cycle):

* `settings`: environment variable names, modes, parsers and in-process
  overrides; imports nothing of the package.
* `user_warning`, `elf`, `gpu_facts`: warnings at the user's line, the ELF
  check before dlopen, facts about this process's GPUs.
* `choice`: which library file this process loads (the one place that knows
  where the libraries live).
* `calls`: the library's C functions through ctypes, on a handle.
* `loader`: loads the chosen library once, after its checks, into the one
  handle (`loaded()`: op module, path, build record, ctypes library).
* `backward_choice`, `xla_fallback`: which backward the gradient builds, and
  when the pure-Python version runs inside XLA.

`grad_reverse.ops` sits on top of these, and `grad_reverse.options` is the
users' facade over `settings` and the loaded library.
"""
