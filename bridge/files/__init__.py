"""Files and voice: what a person sends (saved, transcribed), what the agent sends,
and the bridge's reads of files an agent can write."""
