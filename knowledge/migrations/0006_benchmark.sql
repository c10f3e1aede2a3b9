-- Published end-to-end serving measurements (knowledge/data/benchmarks/*.yaml, issue 25): one row per point, its
-- configuration and load as flat columns for filtering, its figures in SI units (seconds, tokens/s) as flat
-- columns for the common statistics, and config / measured as JSON text; `doc` is the whole record as written.
CREATE TABLE benchmark (
    id VARCHAR PRIMARY KEY, source VARCHAR, url VARCHAR, locator VARCHAR, date VARCHAR,
    model VARCHAR, model_hf VARCHAR, hardware VARCHAR, hardware_name VARCHAR, devices INTEGER,
    framework VARCHAR, framework_name VARCHAR, framework_version VARCHAR, weight_format VARCHAR, kv_format VARCHAR,
    tp INTEGER, pp INTEGER, ep INTEGER, dp_attention BOOLEAN, replicas INTEGER,
    input_tokens DOUBLE, output_tokens DOUBLE, dataset VARCHAR,
    load_kind VARCHAR, concurrency INTEGER, requests_per_s_offered DOUBLE, offline BOOLEAN, server_scenario BOOLEAN,
    ttft_mean_s DOUBLE, ttft_median_s DOUBLE, ttft_p99_s DOUBLE,
    tpot_mean_s DOUBLE, tpot_median_s DOUBLE, tpot_p99_s DOUBLE,
    itl_mean_s DOUBLE, itl_median_s DOUBLE, e2e_mean_s DOUBLE, e2e_median_s DOUBLE,
    output_tokens_per_s DOUBLE, output_tokens_per_s_per_device DOUBLE, output_tokens_per_s_per_user DOUBLE,
    total_tokens_per_s DOUBLE, requests_per_s DOUBLE,
    config_json VARCHAR, measured_json VARCHAR, as_published VARCHAR, note VARCHAR,
    doc VARCHAR NOT NULL
);
