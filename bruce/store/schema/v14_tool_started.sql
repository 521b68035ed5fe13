-- version 14 belongs to another change (a tool execution recorded as started); this placeholder
-- keeps the versions without a gap on this branch and gives way to that script when they meet
SELECT 1;
