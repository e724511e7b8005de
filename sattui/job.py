"""A trainer's scheduler job and Kubernetes pod, as sattui's records and labels carry them.

Vocabulary every layer may use: the engine reads it (sattui/trainer/identity.py) into the
recording header's ``job`` object, and the exporter, the report and the cluster view read
it back from there.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

# Label names as dcgm-exporter gives pods' series (``pod``, ``namespace``) and a Slurm
# job's id: on every series of the exporter (sattui/metrics/exposition.py).
LABELS = ("slurm_job_id", "pod", "namespace")


@dataclass(frozen=True)
class JobIdentity:
    """The trainer's job and pod; None: not known (not under Slurm, not in a pod, or not
    said where sattui can read it)."""

    slurm_job_id: str | None = None
    slurm_job_name: str | None = None
    slurm_procid: str | None = None
    pod: str | None = None
    pod_uid: str | None = None
    namespace: str | None = None
    run_id: str | None = None

    def to_record(self) -> dict[str, str]:
        """The header's and the report's ``labels`` object (CONTRACT.md): every field, an
        unknown one empty."""
        return {k: v or "" for k, v in asdict(self).items()}

    def label_values(self) -> tuple[str, ...]:
        """The values of ``LABELS``; an unknown one is empty (Prometheus reads an empty
        label as no label)."""
        return tuple(getattr(self, k) or "" for k in LABELS)

    @classmethod
    def from_record(cls, rec: object) -> JobIdentity:
        """A header's ``job`` object back (anything else: nothing known)."""
        if not isinstance(rec, dict):
            return cls()
        return cls(**{k: str(rec[k]) for k in cls.__dataclass_fields__ if isinstance(rec.get(k), (str, int))
                      and str(rec[k])})
