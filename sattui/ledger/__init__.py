"""The time ledger: where every second of each rank's main thread and each card went.

One home for what the advisor's ledger rules, the cluster's judge across hosts, the card
screen's dips, the report and the exporter read; none of them rebuilds it.

* ``window`` — the Timeline over ``[t0, t1)`` as the ledger and every rule read it
  (``Window``), and the one-second bins of main-thread seconds by state (``StackBinner``);
* ``bins`` — the ledger itself: per-bin accounts of each rank (``RankLedger``) and card
  (``CardLedger``), the causes given to each lost second from what the rest of the tree
  did at the same moment, the DataLoader workers' restarts, ``build``/``total`` and the
  running book of settled bins (``LedgerBook``);
* ``causes`` — the one table of causes: id, words on screen, the rule that names it, fix,
  whether it is a data-wait or an input-pipeline cause;
* ``steps`` — training steps seen from outside in the main thread's stacks.

It sits below the advisor and the views, above the Timeline (the layers contract in
pyproject.toml): nothing here imports the advisor at run time.
"""
