"""Git work: a conversation's project, its worktree, git run by the bridge, snapshots."""
