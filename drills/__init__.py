"""drills: disaster-recovery drill orchestration for GPU/AI platforms on Kubernetes."""

__version__ = "0.1.0"
