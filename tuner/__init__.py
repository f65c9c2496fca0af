"""Tries capture scopes on the GPU and writes the winner back into the user's loop."""
