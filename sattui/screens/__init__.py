"""The TUI's screens: main, card drill-down, workers, stacks, help (all import Textual)."""
