-- shoal schema, version 4: held for the one-round-trip claim, which brings its own 0004.
-- (This placeholder lets the history migration be 0005 on this branch; the merge replaces
-- it with the claim's migration.)
SELECT 1;
