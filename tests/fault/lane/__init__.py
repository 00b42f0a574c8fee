"""An app the fault suite's worker processes install when ``ZQ_FAULT_ASYNC`` is set
(tests/fault/settings.py): its ``tasks`` module, found by the worker's autodiscovery,
registers the test project's ``async def`` tasks, so those workers start an event-loop
lane."""
