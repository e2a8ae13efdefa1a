from infosvc_agents.cli import main

raise SystemExit(main())
