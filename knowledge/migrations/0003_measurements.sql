-- Measured kernel tables copied from NVIDIA's aiconfigurator-core wheel (knowledge/data/measured/):
-- one row per file here; the rows themselves go to measured_<table> tables that the builder creates
-- from the Parquet files (their columns are the files' own, plus `system` and `file`).
CREATE TABLE measurement_file (
    path VARCHAR PRIMARY KEY, system VARCHAR NOT NULL, op VARCHAR NOT NULL, table_name VARCHAR NOT NULL,
    framework VARCHAR NOT NULL, version VARCHAR NOT NULL, path_in_wheel VARCHAR NOT NULL, sha256 VARCHAR NOT NULL,
    bytes INTEGER NOT NULL, gpu VARCHAR, rows INTEGER NOT NULL, columns VARCHAR NOT NULL, license VARCHAR NOT NULL,
    package VARCHAR NOT NULL, package_version VARCHAR NOT NULL
);
