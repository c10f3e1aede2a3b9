-- The Chinese summary of a case (knowledge/data/cases.yaml `summary_zh`, our own words), beside the English
-- `summary`: shown on the case page and indexed for Chinese search. Nullable: a case may still lack one.
ALTER TABLE case_study ADD COLUMN summary_zh VARCHAR;
