from benchmarks.baselines.runner import main

main()
