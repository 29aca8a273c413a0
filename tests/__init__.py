"""The test suite. A package only so that ``tests.support`` has one importable name (pytest's ``pythonpath``
puts the repository root on ``sys.path``); the test directories themselves are not packages."""
