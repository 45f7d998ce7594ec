"""Where a sweep's runs execute: in-process (``serial``) or on Ray (``ray_runtime``,
``ray_setup``), the cluster's capacity and a lost head (``capacity``), the driver that `farm
sweep` watches (``driver``)."""
