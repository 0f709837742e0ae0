"""Sandbox tests: conformance across backends, local escapes, the registry, the emulator."""
