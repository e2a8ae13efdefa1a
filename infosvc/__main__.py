from infosvc.cli import main

raise SystemExit(main())
