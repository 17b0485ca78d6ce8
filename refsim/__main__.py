from refsim.cli import main

raise SystemExit(main())
