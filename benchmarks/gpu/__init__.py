"""The GPU check and its carry kit (benchmarks/gpu/README.md): ``gpu_wheels.sh`` packs the
wheels an air-gapped GPU machine lacks, ``gpu_kit.sh`` stashes and installs them there,
``gpu_check.sh`` runs the budgeted sections of ``gpu_sections.py``, and ``gpu_report.py``
turns the committed results (``benchmarks/results/gpu/``) into the README's GPU table."""
