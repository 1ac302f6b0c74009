from devsy.cli.main import main

raise SystemExit(main())
