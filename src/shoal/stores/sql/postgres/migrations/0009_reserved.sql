-- shoal schema, version 9: reserved. The branch that adds task labels owns this number;
-- this file only keeps the numbers without a gap until that branch lands, and goes then.
SELECT 1;
