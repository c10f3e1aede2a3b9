-- The store's first schema. Every entity keeps its full record (with per-field provenance) in `doc`
-- (JSON text) and its main columns for filtering; `fact` holds one row per sourced number.
CREATE TABLE source (
    id VARCHAR PRIMARY KEY, title VARCHAR NOT NULL, url VARCHAR NOT NULL, kind VARCHAR,
    publisher VARCHAR, date VARCHAR, accessed VARCHAR, doc VARCHAR NOT NULL
);
CREATE TABLE hardware (
    id VARCHAR PRIMARY KEY, name VARCHAR NOT NULL, vendor VARCHAR, architecture VARCHAR,
    form_factor VARCHAR, scope VARCHAR, memory_bytes DOUBLE, memory_bandwidth_bytes_per_s DOUBLE,
    power_w DOUBLE, doc VARCHAR NOT NULL
);
CREATE TABLE hardware_peak (
    hardware_id VARCHAR NOT NULL, input_precision VARCHAR NOT NULL, accumulator VARCHAR,
    unit VARCHAR NOT NULL, sparsity VARCHAR NOT NULL, flop_per_s DOUBLE NOT NULL,
    source_id VARCHAR NOT NULL, locator VARCHAR
);
CREATE TABLE link (
    id VARCHAR PRIMARY KEY, name VARCHAR NOT NULL, kind VARCHAR, generation VARCHAR,
    one_way_bytes_per_s DOUBLE, latency_s DOUBLE, direction_convention VARCHAR, doc VARCHAR NOT NULL
);
CREATE TABLE model (
    id VARCHAR PRIMARY KEY, name VARCHAR NOT NULL, family VARCHAR, organisation VARCHAR, kind VARCHAR,
    attention VARCHAR, layers INTEGER, hidden_size INTEGER, params_total DOUBLE, params_active DOUBLE,
    doc VARCHAR NOT NULL
);
CREATE TABLE framework (
    id VARCHAR PRIMARY KEY, name VARCHAR NOT NULL, kind VARCHAR, url VARCHAR, license VARCHAR,
    doc VARCHAR NOT NULL
);
CREATE TABLE framework_feature (
    framework_id VARCHAR NOT NULL, feature VARCHAR NOT NULL, name VARCHAR, since VARCHAR, date VARCHAR,
    source_id VARCHAR NOT NULL, locator VARCHAR
);
CREATE TABLE price (
    id VARCHAR PRIMARY KEY, provider VARCHAR, model VARCHAR, date VARCHAR,
    input_usd_per_mtok DOUBLE, cache_read_usd_per_mtok DOUBLE, cache_write_usd_per_mtok DOUBLE,
    output_usd_per_mtok DOUBLE, doc VARCHAR NOT NULL
);
CREATE TABLE case_study (
    slug VARCHAR PRIMARY KEY, title_zh VARCHAR NOT NULL, title_en VARCHAR NOT NULL, section VARCHAR,
    section_en VARCHAR, section_order INTEGER, chapters VARCHAR, summary VARCHAR, source_url VARCHAR,
    source_commit VARCHAR, doc VARCHAR NOT NULL
);
CREATE TABLE derivation (
    id VARCHAR PRIMARY KEY, case_slug VARCHAR NOT NULL, name VARCHAR NOT NULL, family VARCHAR,
    title VARCHAR, calculator VARCHAR, bound BOOLEAN, doc VARCHAR NOT NULL
);
CREATE TABLE fact (
    kind VARCHAR NOT NULL, record_id VARCHAR NOT NULL, field VARCHAR NOT NULL, value DOUBLE NOT NULL,
    source_id VARCHAR NOT NULL, locator VARCHAR, as_published VARCHAR, note VARCHAR
);
CREATE TABLE glossary (id VARCHAR PRIMARY KEY, term VARCHAR NOT NULL, kind VARCHAR, doc VARCHAR NOT NULL);
CREATE TABLE claim (id VARCHAR PRIMARY KEY, verdict VARCHAR, calculator VARCHAR, doc VARCHAR NOT NULL);
CREATE TABLE meta (key VARCHAR PRIMARY KEY, value VARCHAR);
