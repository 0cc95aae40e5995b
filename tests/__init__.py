"""The test suite, by kind and, for unit tests, by the package under test.

- ``unit/``: the library through its public functions, one folder per package of
  ``compactctl/`` (``io/``, ``formats/``, ``layers/``, ``summarize/``, ``app/``, ``evaluate/``)
  and a module per top-level module (``test_session.py``, ``test_model.py``, ...). A
  ``test_*_oracle.py`` beside a module compares each of its fast paths with the plain code it
  replaces.
- ``cli/``: the command line end to end; ``golden.py`` and ``cases/`` hold the golden cases
  (input, command line, expected stdout, stderr and appended bytes) of every command.
- ``system/``: many processes or long runs: crashes (SIGKILL at random points), concurrent
  writers and locks, fuzzing, memory-motivated paths.
- ``docs/``: the README's examples run and every docs reference resolves.

Shared code: ``conftest.py`` (fixtures: isolated state per test), ``helpers.py`` (paths, running
the CLI or Python in a subprocess, writing transcripts), ``sessions.py`` (samples, grown
sessions), ``strategies.py`` (hypothesis), ``fakes.py`` (a fake summarizer and a fake litellm
model with queued answers). Import them as ``tests.helpers`` etc. from any folder.
"""
