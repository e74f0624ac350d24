"""Review tests: defects found by probing the gateway as a newcomer and as an attacker."""
