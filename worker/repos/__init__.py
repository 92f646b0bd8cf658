"""Repositories: mirrors, immutable snapshots and their leases, the symbol index, refreshes."""
