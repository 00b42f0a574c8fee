"""Demo app of the test project: models that tasks and tests refer to by reference."""
