"""Beyond one machine: a whole job read back from Prometheus (prom.py: the HTTP API;
source.py: the job's hosts, cards and ranks; judge.py: judgments across hosts;
report.py: ``sattui report --prometheus``; view.py: ``sattui cluster``'s model)."""
