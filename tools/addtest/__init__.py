"""add_test's modules; `python3 tools/add_test.py` is the command (its docstring: the usage).

The package is `addtest`, not `add_test`: Python cannot hold a script `tools/add_test.py` and a
package `tools/add_test/` side by side (`from tools import add_test` would find the package),
and the script's path is the documented command.

Floors, each module importing only those below it (tools/test_add_test_layers.py checks it):
  collect.py         the child that collects and runs one file in the tests' interpreter
  environment.py     the tests' environment (@pypi's), and the repository's root
  deps.py, pack.py   the labels a file's collection needs; how files are packed into targets
  closure.py         the site a file's target will have, linked for add_test's measuring
  record.py          what directory mode measured of each file, kept beside its BUILD file
  measure.py         runs the child as a variant's target runs the file
  stanza.py          the stanza model: the torch_test call, the entries measured outcomes
                     propose, the notes of a run that did not end normally
  merge.py           what directory mode writes, merged into what a person may have edited
  file_mode.py       one file: the printed report
  directory_mode.py  a directory: its BUILD.bazel and expectations files
"""
