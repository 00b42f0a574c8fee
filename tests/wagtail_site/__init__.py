"""A minimal Wagtail site on ZQueueBackend (tests/test_wagtail.py runs it)."""
