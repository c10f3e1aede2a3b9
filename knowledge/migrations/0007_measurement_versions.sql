-- The two versions of a measured table (knowledge/data/measured/manifest.yaml): `directory_version`, the wheel
-- directory's name (what `version` already holds), and `collected_with`, the framework version the rows name in
-- their own `version` column, which answers cite (L40S's custom all-reduce in vllm/0.22.0 was collected with 0.14.0).
ALTER TABLE measurement_file ADD COLUMN directory_version VARCHAR;
ALTER TABLE measurement_file ADD COLUMN collected_with VARCHAR;
