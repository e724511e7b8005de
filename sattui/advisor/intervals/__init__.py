"""How sure the advisor is of a share of time: the one home of its intervals.

Two methods, for two questions, both over the ledger's one-second bins:

* :mod:`.sequential` — *is this cause's share over a severity threshold yet?* Asked every
  second, so its interval is anytime-valid (a confidence sequence): the bins' lag-1
  model and, for periodic stalls, the bins read as cycles. Used by the verdict's
  hysteresis (when a finding shows and clears) and for every finding's ``impact_ci``.
* :mod:`.batch_means` — *does one rank wait for the others more than they wait for it?*
  A paired difference of two shares over the same bins, by non-overlapping batch means
  (what both ranks share, a slow second of the host, cancels). Used by the straggler
  rule's asymmetry test; it is a fixed-sample interval, read once per evaluation over the
  ledger window.
"""
