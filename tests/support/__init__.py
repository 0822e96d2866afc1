"""Test support: a scripted fake LLM and helpers to run the real pi agents."""
