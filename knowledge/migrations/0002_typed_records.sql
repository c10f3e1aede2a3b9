-- Columns derived from the typed records (knowledge/records.py): how many devices a hardware record
-- covers and the memory of one of them, the models' shipped weight format, and the reading of a fact
-- (what it covers; binary or decimal GB).
ALTER TABLE hardware ADD COLUMN devices_in_scope INTEGER;
ALTER TABLE hardware ADD COLUMN memory_per_device_bytes DOUBLE;
ALTER TABLE model ADD COLUMN weight_dtype VARCHAR;
ALTER TABLE fact ADD COLUMN per VARCHAR;
ALTER TABLE fact ADD COLUMN basis VARCHAR;
