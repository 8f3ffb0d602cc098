-- Kept empty: this version is taken by a change made alongside.
SELECT 1;
