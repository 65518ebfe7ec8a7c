// attn.results -- what every run writes next to its numbers, in three partitions:
//  - :files   (modules/results/files.cppm)   files written atomically;
//  - :machine (modules/results/machine.cppm) the machine and build a run ran on, as plain
//             key/value metadata (importers need no JSON headers), and the process's memory;
//  - :table   (modules/results/table.cppm)   number formatting and a small text-table printer.
export module attn.results;
export import attn.core;
export import :files;
export import :machine;
export import :table;
