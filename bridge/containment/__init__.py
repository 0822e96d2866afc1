"""What keeps an agent in: its sandbox, its user, what it cannot see or load."""
