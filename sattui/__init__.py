"""sattui: is every accelerator saturated, and if not, what is the trainer waiting for?"""

__version__ = "0.1.0"
