from kubeop.cli import main

main()
