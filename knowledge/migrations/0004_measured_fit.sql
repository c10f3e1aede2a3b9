-- Derived facts: the alpha-beta fit of the measured all-reduces (nccl and custom_allreduce), one row per
-- measured system, table and GPU count. The builder computes them with calculators.link_fit.fit_all_reduce
-- from the rows of measured_<table_name>; `file` and `sha256` name the measured file they came from.
CREATE TABLE measured_fit (
    system VARCHAR NOT NULL, table_name VARCHAR NOT NULL, gpus INTEGER NOT NULL,
    start_up_s DOUBLE NOT NULL, algorithm_bytes_per_s DOUBLE NOT NULL, alpha_s DOUBLE NOT NULL,
    link_bytes_per_s DOUBLE NOT NULL, rms_relative_residual DOUBLE NOT NULL, max_relative_residual DOUBLE NOT NULL,
    points INTEGER NOT NULL, message_bytes_min DOUBLE NOT NULL, message_bytes_max DOUBLE NOT NULL,
    op_name VARCHAR NOT NULL, dtype VARCHAR, backend VARCHAR, file VARCHAR NOT NULL, sha256 VARCHAR NOT NULL,
    method VARCHAR NOT NULL,
    PRIMARY KEY (system, table_name, gpus)
);
