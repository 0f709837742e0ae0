"""Local emulators of external services, speaking their real wire formats on 127.0.0.1."""
