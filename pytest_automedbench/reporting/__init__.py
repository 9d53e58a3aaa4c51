"""Reports from run results: aggregation, the leaderboard table, amb-results.json."""
