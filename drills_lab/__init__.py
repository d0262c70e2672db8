"""The local lab: stand-in primary and DR sites on loopback, for the demo and the tests."""
